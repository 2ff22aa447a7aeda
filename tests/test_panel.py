"""The widget panel, driven through its traits next to a real IPython shell.

Its controls and areas are reached as the front end has them: in the
panel's widget tree, by the CSS class the panel gives each (``ui(p).stance``
is the widget of class ``sm-stance``; see ``conftest.ui``).

The panel is built with ``stance_magic.panel()`` (no shell: a plain
InteractiveShell has no Jupyter kernel, so ``%stance panel`` itself refuses
there, as tested below); the shell runs the cells and the magics. Nothing of
torch or the engine is mocked.
"""

from __future__ import annotations

import html
import importlib
import sys
from typing import Any

import pytest
from IPython.utils.capture import capture_output

import stance_magic
from stance_magic.session.engine import SKIP_GUARD_WARNING, get_engine
from stance_magic.stance import make_stance
from stance_magic.widgets.live import without_headline
from stance_magic.widgets.panel import NO_BACKEND, PanelUnavailable, StancePanel

from conftest import has_row, ui

widgets = pytest.importorskip("ipywidgets")

SETUP = """\
import torch, stance_magic
f = torch.compile(lambda x: x.sin() + 1, backend="eager")
x = torch.ones(3)
"""


def run(sh: Any, code: str) -> Any:
    with capture_output() as cap:
        result = sh.run_cell(code, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    assert result.error_before_exec is None, result.error_before_exec
    return cap


@pytest.fixture
def ip(shell: Any) -> Any:
    run(shell, SETUP)
    return shell


@pytest.fixture
def make_panel(ip: Any) -> Any:
    made: list[StancePanel] = []
    get_engine().clear_history()  # earlier tests' reports would show in the live area

    def make() -> StancePanel:
        p = stance_magic.panel()
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()
    # Watch off before the shell fixture's `%unload_ext` cell: unloading from a
    # watched cell leaves that cell's measuring window open (reported to the lead).
    get_engine().set_watch(False)


@pytest.fixture
def events() -> Any:
    seen: list[tuple[str, Any]] = []

    def listener(event: str, value: Any) -> None:
        seen.append((event, value))

    get_engine().observe(listener)
    yield seen
    get_engine().unobserve(listener)


def test_builds_without_a_shell_and_shows_the_engine_state(make_panel: Any) -> None:
    p = make_panel()
    assert isinstance(p, widgets.VBox)
    assert tuple(ui(p).stance.options) == stance_magic.supported_stances()
    assert ui(p).stance.value == "default"
    assert ui(p).backend.value == NO_BACKEND
    labels = [label for label, _ in ui(p).backend.options]
    assert labels[0] == NO_BACKEND and "eager" in labels and "inductor" in labels
    assert ui(p).skip_guard.value is False and ui(p).watch.value is False
    assert repr(p) == "StancePanel(session=default, watch=off)"
    assert "No measured cell yet" in ui(p).live.titles[0]
    assert not p.expanded  # compact until opened
    # Only backends that can run here are offered.
    assert not {"tvm", "openxla", "ts", "aot_ts"} & set(labels)
    assert not [n for n in labels if "TESTING_ONLY" in n or "minifier" in n]


def test_dropdown_sets_what_the_next_cell_runs_under(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    ui(p).stance.value = "force_eager"
    assert get_engine().session == make_stance("force_eager")
    assert "session stance: force_eager (was: default)" in ui(p).message.value
    run(ip, "s = stance_magic.current_stance()")
    assert ip.user_ns["s"].name == "force_eager"
    assert "session stance: force_eager" in run(ip, "%stance").stdout
    # Under force_eager the compiled function runs eagerly: nothing compiles.
    run(ip, "%stance watch on")
    run(ip, "y = f(x)")
    assert get_engine().history[-1].compiles == 0
    assert ui(p).watch.value is True


def test_magics_move_the_controls(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    assert ui(p).backend_note.layout.display == "none"
    run(ip, "%stance eager_on_recompile")
    assert ui(p).stance.value == "eager_on_recompile"
    assert ui(p).backend.disabled
    # Why it is disabled is visible text (tooltips do not render).
    assert ui(p).backend_note.layout.display != "none"
    assert "only under the default stance" in ui(p).backend_note.value
    run(ip, "%stance default -b eager")
    assert (ui(p).stance.value, ui(p).backend.value) == ("default", "eager")
    assert not ui(p).backend.disabled
    run(ip, "%stance -u")
    assert ui(p).skip_guard.value is True
    assert ui(p).skip_warning.layout.display != "none"
    run(ip, "%stance default")
    assert (ui(p).backend.value, ui(p).skip_guard.value) == (NO_BACKEND, False)
    # A direct torch call in a cell is picked up after the cell (engine.sync).
    run(ip, "torch.compiler.set_stance('fail_on_recompile')")
    assert ui(p).stance.value == "fail_on_recompile"


def test_no_feedback_loop(ip: Any, make_panel: Any, events: list[Any]) -> None:
    make_panel()
    p = make_panel()
    run(ip, "%stance force_eager")
    assert [e for e, _ in events] == ["session"]
    events.clear()
    ui(p).stance.value = "default"
    assert [e for e, _ in events] == ["session", "note"]  # the note: what every panel says
    events.clear()
    ui(p).stance.value = "default"  # no change, no event
    run(ip, "%stance default -q")
    assert events == []


def test_two_panels_agree(ip: Any, make_panel: Any) -> None:
    a, b = make_panel(), make_panel()
    ui(a).stance.value = "eager_then_compile"
    assert ui(b).stance.value == "eager_then_compile"
    ui(b).watch.value = True
    assert ui(a).watch.value is True and get_engine().watch
    ui(b).stance.value = "default"
    ui(b).backend.value = "aot_eager"
    assert (ui(a).stance.value, ui(a).backend.value) == ("default", "aot_eager")
    run(ip, "%stance watch off")
    assert ui(a).watch.value is False and ui(b).watch.value is False
    run(ip, "y = f(x)")
    ui(a).skip_guard.value = True
    assert ui(b).skip_guard.value is True
    assert SKIP_GUARD_WARNING in ui(b).skip_warning.value


def test_skip_guard_checkbox_and_its_warning(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    assert ui(p).skip_warning.layout.display == "none"
    ui(p).skip_guard.value = True
    assert get_engine().session == make_stance("default", True)
    assert ui(p).skip_warning.layout.display != "none"
    assert SKIP_GUARD_WARNING in ui(p).skip_warning.value
    run(ip, "s = stance_magic.current_stance()")
    assert ip.user_ns["s"].skip_guard_eval_unsafe is True
    ui(p).skip_guard.value = False
    assert get_engine().session == make_stance("default")
    assert ui(p).skip_warning.layout.display == "none"


def test_backend_chooser(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    ui(p).backend.value = "eager"
    assert get_engine().session == make_stance("default", backend="eager")
    run(ip, "%%stance\ny = f(x)")
    assert get_engine().history[-1].backend == "eager"
    assert "default (backend=eager)" in ui(p).live.titles[0]

    # A non-default stance drops the backend (torch refuses the combination),
    # and every open panel says so, not only the one clicked.
    other = make_panel()
    ui(p).stance.value = "force_eager"
    assert get_engine().session == make_stance("force_eager")
    assert ui(p).backend.value == NO_BACKEND and ui(p).backend.disabled
    assert "backend eager dropped" in ui(p).message.value
    # the previous stance reads without parentheses inside "(was: ...)"
    assert "session stance: force_eager (was: default, backend=eager)" in ui(p).message.value
    assert ui(p).message.value == ui(other).message.value

    # Forcing one anyway is explained and undone, never left to the next cell.
    ui(p).backend.value = "eager"
    assert ui(p).backend.value == NO_BACKEND
    assert get_engine().session == make_stance("force_eager")
    assert "not applied" in ui(p).message.value and "default" in ui(p).message.value
    run(ip, "y = f(x)")

    # A callable backend from the notebook shows by name.
    run(ip, "def mybackend(gm, example_inputs):\n    return gm.forward\n")
    run(ip, "%stance default -b mybackend")
    assert ui(p).backend.label == "mybackend (callable)"
    assert ui(p).backend.value is ip.user_ns["mybackend"]
    ui(p).skip_guard.value = True  # keeps the callable backend
    assert get_engine().session.backend is ip.user_ns["mybackend"]


def test_reset_button_and_live_report(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    p.expand()
    run(ip, "%%stance\ny = f(x)")
    run(ip, "%%stance\ny = f(x)")
    assert get_engine().history[-1].compiles == 0
    ui(p).reset.click()
    assert "compiled code forgotten" in ui(p).message.value
    run(ip, "%%stance\ny = f(x)")
    rep = get_engine().history[-1]
    assert rep.compiles == 1
    assert ui(p).live.titles[0].startswith(f"In [{rep.execution_count}] · default")
    # the report less its headline: the title says it, once
    assert without_headline(rep._repr_html_()) in ui(p).report.value
    assert "sm-headline" not in ui(p).report.value
    assert ui(p).chart.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert ui(p).chart.layout.display != "none"


def test_watch_toggle(ip: Any, make_panel: Any) -> None:
    p, other = make_panel(), make_panel()
    ui(p).watch.value = True
    assert get_engine().watch is True
    assert "watch on: every cell is measured" in ui(p).message.value
    assert ui(other).message.value == ui(p).message.value
    n = len(get_engine().history)
    run(ip, "y = f(x + 1)")
    assert len(get_engine().history) == n + 1
    assert ui(p).live.titles[0].startswith(f"In [{get_engine().history[-1].execution_count}] ·")
    run(ip, "%stance watch off")  # this cell is still watched
    assert ui(p).watch.value is False
    assert "watch off: only %%stance cells are measured" in ui(other).message.value
    n = len(get_engine().history)
    run(ip, "y = f(x)")
    assert len(get_engine().history) == n


def test_stance_cell_shows_its_stance_without_moving_the_dropdown(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    ip.user_ns.update(p=p, ui=ui)
    run(ip, "%%stance force_eager\ntitle_inside = ui(p).live.titles[0]\ny = f(x)")
    assert ip.user_ns["title_inside"].startswith("a %%stance cell is running under force_eager")
    assert "the session stays default" in ip.user_ns["title_inside"]
    assert ui(p).stance.value == "default"
    assert "force_eager (its own; session: default)" in ui(p).live.titles[0]
    p.expand()
    assert "force_eager" in ui(p).report.value
    run(ip, "%%stance\ny = f(x)")
    assert "its own" not in ui(p).live.titles[0]


def test_change_during_a_cell_applies_to_the_next_cell(ip: Any, make_panel: Any) -> None:
    ip.user_ns.update(p=make_panel(), ui=ui)
    run(
        ip,
        "%%stance eager_on_recompile\n"
        "ui(p).stance.value = 'force_eager'\n"
        "inside = stance_magic.current_stance()\n"
        "said = ui(p).message.value\n",
    )
    assert ip.user_ns["inside"].name == "eager_on_recompile"
    assert "from the next cell (a cell is running)" in ip.user_ns["said"]
    # When the cell has ended, the message says the change is in effect.
    assert "session stance: force_eager, chosen while the last cell ran, is in effect now" in (
        ui(ip.user_ns["p"]).message.value
    )
    assert stance_magic.current_stance().name == "force_eager"
    assert ui(ip.user_ns["p"]).stance.value == "force_eager"


def test_close_stops_following_the_engine(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    p.close()
    run(ip, "%stance force_eager")
    assert ui(p).stance.value == "default"
    assert repr(p) == "StancePanel(closed)"
    p.close()  # twice is fine


def test_stance_panel_refuses_a_shell_without_kernel(ip: Any) -> None:
    with capture_output() as cap:
        result = ip.run_cell("%stance panel")
    assert result.result is None
    assert "JupyterLab" in cap.stderr and "no Jupyter kernel" in cap.stderr
    with pytest.raises(PanelUnavailable, match="JupyterLab or Jupyter Notebook"):
        stance_magic.panel(shell=ip)
    assert "session stance: force_eager" in run(ip, "%stance force_eager").stdout


def test_without_ipywidgets(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("stance_magic.widgets.panel")
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with capture_output() as cap:
        ip.run_cell("%stance panel")
    assert "pip install ipywidgets" in cap.stderr
    with pytest.raises(PanelUnavailable, match=r"pip install ipywidgets"):
        stance_magic.panel()
    # The module also imports cleanly where ipywidgets is missing.
    monkeypatch.delitem(sys.modules, "stance_magic.widgets.panel")
    fresh = importlib.import_module("stance_magic.widgets.panel")
    assert fresh is not module and fresh.widgets is None
    with pytest.raises(fresh.PanelUnavailable, match="pip install ipywidgets"):
        fresh.panel()
    # The magics keep working.
    assert "session stance: force_eager" in run(ip, "%stance force_eager").stdout


def test_package_attribute_is_the_function_whatever_the_import_order(make_panel: Any) -> None:
    importlib.import_module("stance_magic.widgets.panel")
    assert (
        callable(stance_magic.panel)
        and stance_magic.panel.__module__ == "stance_magic.widgets.panel"
    )
    assert isinstance(make_panel(), StancePanel)


# -- cost per cell, readable chart, compact, honest, one notation ---------------


def _count_sends(monkeypatch: pytest.MonkeyPatch, panel: StancePanel) -> list[str]:
    """Record every state message the panel's widgets would send to the front end."""
    sent: list[str] = []
    ids = set()
    stack = [panel]
    while stack:
        w = stack.pop()
        ids.add(id(w))
        stack.extend(getattr(w, "children", ()))
    original = widgets.Widget.send_state

    def send_state(self: Any, key: Any = None) -> None:
        if id(self) in ids:
            sent.append(f"{type(self).__name__}:{key}")
        original(self, key)

    monkeypatch.setattr(widgets.Widget, "send_state", send_state)
    return sent


def test_a_watched_cell_without_compiled_code_costs_the_panel_nothing(
    ip: Any, make_panel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = make_panel()
    p.expand()
    run(ip, "%stance watch on")
    run(ip, "y = f(x)")  # compiles: shown
    title = ui(p).live.titles[0]
    sent = _count_sends(monkeypatch, p)
    for _ in range(5):
        run(ip, "z = 1")  # measured (watch), then left out of the history
    assert sent == []  # nothing redrawn, nothing even sent
    assert ui(p).live.titles[0] == title


def test_collapsed_panel_updates_one_line_and_draws_on_opening(
    ip: Any, make_panel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stance_magic import plots

    drawn: list[int] = []
    real = plots.history_figure

    def counting(*args: Any, **kwargs: Any) -> Any:
        drawn.append(1)
        return real(*args, **kwargs)

    # the panel's chart is drawn by history_png, beside history_figure in its module
    monkeypatch.setattr(plots.history, "history_figure", counting)
    p = make_panel()
    run(ip, "%%stance\ny = f(x)")
    rep = get_engine().history[-1]
    assert rep.compiles == 1
    assert ui(p).live.titles[0].startswith(f"In [{rep.execution_count}] · default · ")
    assert "compiled 1 graph in " in ui(p).live.titles[0]
    assert ui(p).report.value == "" and ui(p).chart.value == b"" and drawn == []
    p.expand()  # opening fills in the report and draws the chart once
    assert without_headline(rep._repr_html_()) in ui(p).report.value
    assert ui(p).chart.value[:8] == b"\x89PNG\r\n\x1a\n" and len(drawn) == 1
    # A warm cell (cache hits only) changes nothing compiled: summary and
    # report follow it, the chart is not redrawn.
    run(ip, "%%stance\ny = f(x)")
    warm = get_engine().history[-1]
    assert warm.compiles == 0 and warm.cache_hits == 1
    assert "nothing compiled, 1 cache hit" in ui(p).live.titles[0]
    assert without_headline(warm._repr_html_()) in ui(p).report.value and len(drawn) == 1
    # A stance change is a change: redrawn.
    run(ip, "%%stance force_eager\ny = f(x)")
    assert len(drawn) == 2
    # Two panels share one drawing.
    q = make_panel()
    q.expand()
    assert ui(q).chart.value == ui(p).chart.value and len(drawn) == 2


def test_history_chart_is_sized_bounded_and_labelled() -> None:
    pytest.importorskip("matplotlib")
    from stance_magic import plots
    from stance_magic.report import CellReport

    reps = []
    for i in range(60):
        fig: dict = {}
        if i % 2 == 0:  # every other cell compiled; the rest only hit the cache
            fig = {"compiles": 1, "compile_s": 0.2, "wall_s": 0.25}
        else:
            fig = {"cache_hits": 3}
        if i == 57:
            fig.update(skip_guard_eval_unsafe=True, backend="eager")
        if i == 59:
            fig["error"] = "RuntimeError: boom"
        if i >= 50:
            fig["execution_count"] = i + 1 + 100  # IPython's In [M], where the report has it
        reps.append(CellReport(**{"stance": "default", "index": i + 1, "wall_s": 0.01, **fig}))
    cap = plots.history_capacity(plots.HISTORY_WIDTH_PX)
    assert 10 <= cap <= 16
    shown, total = plots.history_cells(reps, cap)
    assert len(shown) == cap and shown[-1] is reps[-1]
    assert total == 32  # 30 compiling cells + the failed one + the stance change after it
    fig = plots.history_figure(reps)
    w, h = fig.get_size_inches() * fig.dpi
    assert (round(w), round(h)) == (plots.HISTORY_WIDTH_PX, plots.HISTORY_HEIGHT_PX)
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[-1] == "In [160]" and ticks[0] == f"cell {shown[0].index}"
    assert "✗ failed" in texts  # a failed cell is marked, not a blank bar
    assert "default (backend=eager, skip_guard_eval_unsafe)" in texts  # the one notation
    assert any(t.startswith(f"last {cap} of {total} cells") for t in texts)
    png = plots.figure_png(fig)
    assert int.from_bytes(png[16:20], "big") == plots.HISTORY_WIDTH_PX  # drawn 1:1, not scaled
    empty = plots.history_figure([CellReport(cache_hits=1, index=1)])
    assert any(
        "no measured cell has compiled" in t.get_text() for t in empty.texts + empty.axes[0].texts
    )


def test_one_notation_for_a_stance(ip: Any, make_panel: Any) -> None:
    from stance_magic.stance import stance_text
    from stance_magic.widgets.panel import summary_line

    p = make_panel()
    out = run(ip, "%stance default -b eager -u").stdout
    want = "default (backend=eager, skip_guard_eval_unsafe)"
    assert f"session stance: {want} (was: default)" in out
    assert stance_text("default", True, "eager") == want
    assert str(get_engine().session) == want
    assert f"session stance: {html.escape(want)}" in ui(p).message.value
    run(ip, "%%stance\nz = 1")  # (compiling now would raise: skip_guard_eval_unsafe)
    rep = get_engine().history[-1]
    assert f"· {want} ·" in ui(p).live.titles[0] == summary_line(rep)
    assert f"· {html.escape(want)} ·" in rep._repr_html_()  # its headline
    assert f"· {want} ·" in str(rep).splitlines()[0]
    assert has_row(rep.text(verbose=True) + "\n", "stance", f"{want}\n")


def test_backends_that_cannot_run_are_not_offered_and_are_refused(ip: Any, make_panel: Any) -> None:
    from stance_magic import probe
    from stance_magic.stance import StanceError

    usable = probe.usable_backends()
    assert {"eager", "aot_eager", "inductor"} <= set(usable)
    assert not {"tvm", "openxla", "openxla_eval", "ts", "aot_ts"} & set(usable)
    assert "needs the tvm package" in (probe.backend_problem("tvm") or "")
    assert "torch.jit.script" in (probe.backend_problem("ts") or "")
    assert "mode" in (probe.backend_problem("aot_eager_decomp_partition_with_mode") or "")
    with pytest.raises(StanceError, match=r"backend 'tvm' cannot run here: needs the tvm"):
        make_stance("default", backend="tvm")
    with capture_output() as cap:
        result = ip.run_cell("%stance default -b tvm")
    assert "cannot run here" in str(result.error_in_exec) or "cannot run here" in cap.stderr
    assert get_engine().session == make_stance("default")
    p = make_panel()
    offered = [v for _, v in ui(p).backend.options]
    assert offered[:3] == [NO_BACKEND, "inductor", "eager"] and "tvm" not in offered


def test_reset_under_skip_guard_says_what_torch_will_do(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    run(ip, "y = f(x)")  # warm
    ui(p).skip_guard.value = True
    ui(p).reset.click()
    assert "the next call of a compiled function raises RuntimeError" in ui(p).message.value
    assert "Recompilation triggered with skip_guard_eval_unsafe" in ui(p).message.value
    assert "compiles from cold" not in ui(p).message.value
    # ... which is what real torch does:
    with capture_output():
        result = ip.run_cell("y = f(x)")
    assert isinstance(result.error_in_exec, RuntimeError)
    assert "Recompilation triggered with skip_guard_eval_unsafe" in str(result.error_in_exec)
    # %stance reset says the same.
    assert "raises RuntimeError" in run(ip, "%stance reset").stdout
    ui(p).skip_guard.value = False
    ui(p).reset.click()
    assert "compiled code forgotten (torch.compiler.reset()); history kept" in ui(p).message.value


def test_a_change_held_back_by_a_running_cell_says_so(ip: Any, make_panel: Any) -> None:
    import datetime
    import time

    p = make_panel()
    run(ip, "z = 1")  # the panel notes when each cell ends
    ended = p.engine.cells.last_end
    assert ended is not None and abs(time.time() - ended) < 60

    class Kernel:  # what ipykernel's get_parent gives while it handles a comm message
        sent = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=4)

        def get_parent(self, channel: str = "shell") -> dict[str, Any]:
            return {"header": {"msg_type": "comm_msg", "date": self.sent.isoformat()}}

    p.engine.cells.last_end = time.time() - 1  # the change was made 3 s before that cell ended
    ip.kernel = Kernel()
    try:
        ui(p).stance.value = "force_eager"
    finally:
        del ip.kernel
    msg = ui(p).message.value
    assert "session stance: force_eager (was: default); chosen while a cell was running" in msg
    assert "(it ran under default): applies from the next cell" in msg
    # A change made after the last cell ended is not "held back".
    p.engine.cells.last_end = time.time() - 10
    ip.kernel = Kernel()
    try:
        ui(p).stance.value = "default"
    finally:
        del ip.kernel
    assert "chosen" not in ui(p).message.value
    assert "session stance: default (was: force_eager)" in ui(p).message.value


def test_theme_css_and_the_notes_that_need_no_kernel(make_panel: Any) -> None:
    from stance_magic.widgets.panel import BUSY_NOTE, CSS, RESTART_NOTE

    p = make_panel()
    assert CSS in ui(p).title.value
    for var in (
        "--jp-ui-font-color1",
        "--jp-border-color2",
        "--jp-error-color1",
        "--jp-warn-color1",
    ):
        assert var in CSS
    # Every colour is a theme variable (a literal only as its fallback).
    import re

    literals = re.findall(r"[:(,]\s*(#[0-9a-f]{3,6})", CSS)
    assert literals and all(re.search(rf"var\(--jp-[a-z0-9-]+,{c}\)", CSS) for c in literals)
    assert 'data-jp-theme-light="false"' in CSS and "invert(1)" in CSS  # the chart in dark
    assert "jupyter-widgets-disconnected" in CSS and "sm-restart" in CSS
    assert 'data-status="busy"' in CSS and ":focus-within" in CSS
    assert BUSY_NOTE in ui(p).notes.value.replace("&#x27;", "'")
    assert RESTART_NOTE in ui(p).notes.value.replace("&#x27;", "'")


def test_a_change_from_another_thread_while_a_cell_runs_waits_for_the_cell(
    ip: Any, make_panel: Any
) -> None:
    """JupyterLab >= 4.6 with ipykernel 7 sends widget messages over a kernel
    subshell: the kernel handles them in another thread while a cell runs.
    Such a change says so at once and applies when the cell ends."""
    ip.user_ns.update(p=make_panel(), ui=ui)
    run(ip, "y = f(x)")  # compiled, warm
    run(
        ip,
        "import threading\n"
        "def later(fn):\n"
        "    t = threading.Thread(target=fn)\n"
        "    t.start()\n"
        "    t.join()\n"
        "later(lambda: setattr(ui(p).stance, 'value', 'force_eager'))\n"
        "inside = stance_magic.current_stance().name\n"
        "said = ui(p).message.value\n"
        "later(ui(p).reset.click)\n"
        "said_reset = ui(p).message.value\n"
        "y = f(x)\n",
    )
    assert ip.user_ns["inside"] == "default"  # the running cell is not changed under it
    assert "session stance: force_eager (was: default) from the next cell" in ip.user_ns["said"]
    assert "when that cell ends" in ip.user_ns["said_reset"]
    assert stance_magic.current_stance().name == "force_eager"  # applied at its end
    assert "is in effect now" in ui(ip.user_ns["p"]).message.value
    assert get_engine().session == make_stance("force_eager")
    # ... and so was the reset: f compiles again.
    run(ip, "%%stance default -q\ny = f(x)")
    assert get_engine().history[-1].compiles == 1


def test_an_open_panel_shows_compare_and_sweep_reports_complete(ip: Any, make_panel: Any) -> None:
    # Published once, complete: the panel's copy of a --compare report has the
    # compare figures, and each --sweep report its memory, as the cell's output does.
    p = make_panel()
    p.expand()
    seen: list[str] = []

    def at_publish(event: str, value: Any) -> None:
        if event == "report":
            seen.append(value._repr_html_())

    get_engine().observe(at_publish)
    try:
        cap = run(ip, "%%stance default --compare --repeat 3 --no-plot\ny = f(x)")
        rep = get_engine().history[-1]
        for label in ("eager (steady)", "compiled (steady)", "speedup", "break-even"):
            assert any(label in o.data.get("text/html", "") for o in cap.outputs), label
            assert f">{label}</th>" in ui(p).report.value, label
            assert f">{label}</th>" in seen[-1], label
        assert (
            rep.compare.speedup is not None
            and without_headline(rep._repr_html_()) in ui(p).report.value
        )
        n = len(seen)
        run(ip, "%%stance --sweep default,force_eager -m --no-plot\ny = f(x)")
        assert len(seen) == n + 2
        assert all("memory (cpu)" in h and "from a second run" in h for h in seen[n:])
        assert "memory (cpu)" in ui(p).report.value
        assert without_headline(get_engine().history[-1]._repr_html_()) in ui(p).report.value
    finally:
        get_engine().unobserve(at_publish)


def test_the_summary_shows_frames_at_or_near_their_recompile_limit(
    ip: Any, make_panel: Any
) -> None:
    import torch

    p = make_panel()
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = 3
    try:
        run(
            ip,
            "import torch\nf = torch.compile(lambda x, n: x * n, backend='eager', dynamic=False)",
        )
        run(ip, "%%stance default -q\nfor n in (1, 2):\n    f(torch.ones(2), n)")
        assert "<lambda>: 1 recompile left" in ui(p).live.titles[0]
        run(ip, "%%stance default -q\nfor n in (3, 4):\n    f(torch.ones(2), n)")
        assert "<lambda> at its recompile limit" in ui(p).live.titles[0]
    finally:
        torch._dynamo.config.recompile_limit = old


def test_the_open_panel_compares_two_cells_of_its_history(ip: Any, make_panel: Any) -> None:
    """Under the report, the last cell against the one before it (what
    ``%stance diff`` says); picking two cells shows their diff; a collapsed
    panel leaves it alone."""
    from stance_magic.widgets.diff import BEFORE

    p = make_panel()
    run(ip, "%%stance -q\ny = f(x)")
    assert ui(p).diff_b.options == ()  # collapsed: not filled
    p.expand()
    run(ip, "%%stance -q\ny = f(torch.ones(4))")
    run(ip, "%%stance force_eager -q\ny = f(torch.ones(4))")
    hist = get_engine().history
    first, second, third = hist[-3], hist[-2], hist[-1]
    d = stance_magic.diff()  # the last two, as the panel shows by default
    assert ui(p).diff_a.label == BEFORE and ui(p).diff_b.value == id(third)
    assert html.escape(d.headline) in ui(p).diff_out.value
    # pick In [first] against In [second]: the recompile
    ui(p).diff_b.value = id(second)
    ui(p).diff_a.value = id(first)
    want = stance_magic.diff(first, second)
    assert "1 recompile more" in want.headline
    assert html.escape(want.headline) in ui(p).diff_out.value
    # a new cell keeps B where the user put it
    run(ip, "%%stance -q\ny = f(x)")
    assert ui(p).diff_b.value == id(second)
    # the first cell has none before it: said in one line
    ui(p).diff_a.value = 0
    ui(p).diff_b.value = id(hist[0])
    assert "has no measured cell before it" in ui(p).diff_out.value
