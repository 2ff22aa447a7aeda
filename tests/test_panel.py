"""The widget panel, driven through its traits next to a real IPython shell.

The panel is built with ``stance_magic.panel()`` (no shell: a plain
InteractiveShell has no Jupyter kernel, so ``%stance panel`` itself refuses
there, as tested below); the shell runs the cells and the magics. Nothing of
torch or the engine is mocked.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from IPython.utils.capture import capture_output

import stance_magic
from stance_magic.engine import SKIP_GUARD_WARNING, get_engine, make_stance
from stance_magic.widget import NO_BACKEND, PanelUnavailable, StancePanel

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
    assert tuple(p._stance.options) == stance_magic.supported_stances()
    assert p._stance.value == "default"
    assert p._backend.value == NO_BACKEND
    labels = [label for label, _ in p._backend.options]
    assert labels[0] == NO_BACKEND and "eager" in labels and "inductor" in labels
    assert p._skip_guard.value is False and p._watch.value is False
    assert repr(p) == "StancePanel(session=default, watch=off)"
    assert "No measured cell yet" in p._live_title.value


def test_dropdown_sets_what_the_next_cell_runs_under(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    p._stance.value = "force_eager"
    assert get_engine().session == make_stance("force_eager")
    assert "session stance: force_eager (was: default)" in p._message.value
    run(ip, "s = stance_magic.current_stance()")
    assert ip.user_ns["s"].name == "force_eager"
    assert "session stance: force_eager" in run(ip, "%stance").stdout
    # Under force_eager the compiled function runs eagerly: nothing compiles.
    run(ip, "%stance watch on")
    run(ip, "y = f(x)")
    assert get_engine().history[-1].compiles == 0
    assert p._watch.value is True


def test_magics_move_the_controls(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    run(ip, "%stance eager_on_recompile")
    assert p._stance.value == "eager_on_recompile"
    assert p._backend.disabled
    run(ip, "%stance default -b eager")
    assert (p._stance.value, p._backend.value) == ("default", "eager")
    assert not p._backend.disabled
    run(ip, "%stance -u")
    assert p._skip_guard.value is True
    assert p._skip_warning.layout.display != "none"
    run(ip, "%stance default")
    assert (p._backend.value, p._skip_guard.value) == (NO_BACKEND, False)
    # A direct torch call in a cell is picked up after the cell (engine.sync).
    run(ip, "torch.compiler.set_stance('fail_on_recompile')")
    assert p._stance.value == "fail_on_recompile"


def test_no_feedback_loop(ip: Any, make_panel: Any, events: list[Any]) -> None:
    make_panel()
    p = make_panel()
    run(ip, "%stance force_eager")
    assert [e for e, _ in events] == ["session"]
    events.clear()
    p._stance.value = "default"
    assert [e for e, _ in events] == ["session"]
    events.clear()
    p._stance.value = "default"  # no change, no event
    run(ip, "%stance default -q")
    assert events == []


def test_two_panels_agree(ip: Any, make_panel: Any) -> None:
    a, b = make_panel(), make_panel()
    a._stance.value = "eager_then_compile"
    assert b._stance.value == "eager_then_compile"
    b._watch.value = True
    assert a._watch.value is True and get_engine().watch
    b._stance.value = "default"
    b._backend.value = "aot_eager"
    assert (a._stance.value, a._backend.value) == ("default", "aot_eager")
    run(ip, "%stance watch off")
    assert a._watch.value is False and b._watch.value is False
    run(ip, "y = f(x)")
    a._skip_guard.value = True
    assert b._skip_guard.value is True
    assert SKIP_GUARD_WARNING in b._skip_warning.value


def test_skip_guard_checkbox_and_its_warning(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    assert p._skip_warning.layout.display == "none"
    p._skip_guard.value = True
    assert get_engine().session == make_stance("default", True)
    assert p._skip_warning.layout.display != "none"
    assert SKIP_GUARD_WARNING in p._skip_warning.value
    run(ip, "s = stance_magic.current_stance()")
    assert ip.user_ns["s"].skip_guard_eval_unsafe is True
    p._skip_guard.value = False
    assert get_engine().session == make_stance("default")
    assert p._skip_warning.layout.display == "none"


def test_backend_chooser(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    p._backend.value = "eager"
    assert get_engine().session == make_stance("default", backend="eager")
    run(ip, "%%stance\ny = f(x)")
    assert get_engine().history[-1].backend == "eager"
    assert "backend=eager" in p._live_title.value

    # A non-default stance drops the backend (torch refuses the combination).
    p._stance.value = "force_eager"
    assert get_engine().session == make_stance("force_eager")
    assert p._backend.value == NO_BACKEND and p._backend.disabled
    assert "backend eager dropped" in p._message.value

    # Forcing one anyway is explained and undone, never left to the next cell.
    p._backend.value = "eager"
    assert p._backend.value == NO_BACKEND
    assert get_engine().session == make_stance("force_eager")
    assert "not applied" in p._message.value and "default" in p._message.value
    run(ip, "y = f(x)")

    # A callable backend from the notebook shows by name.
    run(ip, "def mybackend(gm, example_inputs):\n    return gm.forward\n")
    run(ip, "%stance default -b mybackend")
    assert p._backend.label == "mybackend (callable)"
    assert p._backend.value is ip.user_ns["mybackend"]
    p._skip_guard.value = True  # keeps the callable backend
    assert get_engine().session.backend is ip.user_ns["mybackend"]


def test_reset_button_and_live_report(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    run(ip, "%%stance\ny = f(x)")
    run(ip, "%%stance\ny = f(x)")
    assert get_engine().history[-1].compiles == 0
    p._reset.click()
    assert "compiled code forgotten" in p._message.value
    run(ip, "%%stance\ny = f(x)")
    rep = get_engine().history[-1]
    assert rep.compiles == 1
    assert f"cell</b> {rep.index}:" in p._live_title.value
    assert rep._repr_html_() in p._report.value
    assert p._chart.value[:8] == b"\x89PNG\r\n\x1a\n"
    assert p._chart.layout.display != "none"


def test_watch_toggle(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    p._watch.value = True
    assert get_engine().watch is True
    n = len(get_engine().history)
    run(ip, "y = f(x + 1)")
    assert len(get_engine().history) == n + 1
    assert f"cell</b> {get_engine().history[-1].index}:" in p._live_title.value
    run(ip, "%stance watch off")  # this cell is still watched
    assert p._watch.value is False
    n = len(get_engine().history)
    run(ip, "y = f(x)")
    assert len(get_engine().history) == n


def test_stance_cell_shows_its_stance_without_moving_the_dropdown(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    run(ip, "%%stance force_eager\ny = f(x)")
    assert p._stance.value == "default"
    assert "force_eager" in p._live_title.value
    assert "the session stays default" in p._live_title.value
    assert "force_eager" in p._report.value
    run(ip, "%%stance\ny = f(x)")
    assert "the session stays" not in p._live_title.value


def test_change_during_a_cell_applies_to_the_next_cell(ip: Any, make_panel: Any) -> None:
    ip.user_ns["p"] = make_panel()
    run(
        ip,
        "%%stance eager_on_recompile\n"
        "p._stance.value = 'force_eager'\n"
        "inside = stance_magic.current_stance()\n",
    )
    assert ip.user_ns["inside"].name == "eager_on_recompile"
    assert "from the next cell" in ip.user_ns["p"]._message.value
    assert stance_magic.current_stance().name == "force_eager"
    assert ip.user_ns["p"]._stance.value == "force_eager"


def test_close_stops_following_the_engine(ip: Any, make_panel: Any) -> None:
    p = make_panel()
    p.close()
    run(ip, "%stance force_eager")
    assert p._stance.value == "default"
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
    module = importlib.import_module("stance_magic.widget")
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with capture_output() as cap:
        ip.run_cell("%stance panel")
    assert "pip install ipywidgets" in cap.stderr
    with pytest.raises(PanelUnavailable, match=r"pip install ipywidgets"):
        stance_magic.panel()
    # The module also imports cleanly where ipywidgets is missing.
    monkeypatch.delitem(sys.modules, "stance_magic.widget")
    fresh = importlib.import_module("stance_magic.widget")
    assert fresh is not module and fresh.widgets is None
    with pytest.raises(fresh.PanelUnavailable, match="pip install ipywidgets"):
        fresh.panel()
    # The magics keep working.
    assert "session stance: force_eager" in run(ip, "%stance force_eager").stdout


def test_package_attribute_is_the_function_whatever_the_import_order(make_panel: Any) -> None:
    importlib.import_module("stance_magic.widget")
    assert callable(stance_magic.panel) and stance_magic.panel.__module__ == "stance_magic.widget"
    assert isinstance(make_panel(), StancePanel)
