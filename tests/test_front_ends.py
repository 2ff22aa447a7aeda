"""The front ends: settings through ``%config`` and IPython config objects,
help generated from the parser, one validation table, one cell tracker."""

from __future__ import annotations

import re

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

import stance_magic
from stance_magic.frontend.magics import StanceMagics
from stance_magic.frontend.options import ACCEPTS, FORMS, RULES, WORD_RULES
from stance_magic.session.engine import get_engine

from conftest import html_outputs, last, run, text_outputs

SETUP = (
    "import torch, stance_magic\n"
    "f = torch.compile(lambda x: x.cos() * 2, backend='eager', dynamic=False)\n"
)
#: a cell with three recompiles: three detail lines under "recompiles"
RECOMPILES = (
    "%%stance\ng = torch.compile(lambda x: x + 1, backend='eager', dynamic=False)\n"
    "for n in (2, 3, 4, 5):\n    g(torch.ones(n))"
)


def images(cap) -> int:
    return sum("image/png" in o.data for o in cap.outputs)


@pytest.fixture
def configured():
    """A shell whose config sets every StanceMagics setting before %load_ext."""
    InteractiveShell.clear_instance()
    c = Config()
    c.HistoryAccessor.enabled = False
    c.StanceMagics.default_repeat = 2
    c.StanceMagics.plot = False
    c.StanceMagics.hints = False
    c.StanceMagics.max_details = 1
    c.StanceMagics.watch = True
    sh = InteractiveShell.instance(config=c)
    sh.display_formatter.active_types = list(sh.display_formatter.format_types)
    sh.run_cell("%load_ext stance_magic")
    sh.run_cell(SETUP)
    yield sh
    sh.run_cell("%unload_ext stance_magic")
    torch.compiler.set_stance("default")
    torch.compiler.reset()
    get_engine().clear_history()
    InteractiveShell.clear_instance()


def _magics(sh) -> StanceMagics:
    return sh.find_line_magic("stance").__self__


def test_settings_from_a_config_object_before_load_ext(configured):
    sh = configured
    m = _magics(sh)
    assert (m.default_repeat, m.plot, m.hints, m.max_details, m.watch) == (2, False, False, 1, True)
    assert get_engine().watch is True
    assert "watch is on" in run(sh, "%stance watch")[1].stdout
    res, cap = run(sh, "%%stance default --compare\ny = f(torch.ones(3))")
    assert res.success
    rep = last(sh)
    assert len(rep.compare.runs["eager"]) == len(rep.compare.runs["compiled"]) == 2
    assert images(cap) == 0  # plot = False
    assert not any(t.startswith("hint:") for t in text_outputs(cap))  # hints = False
    _, cap = run(sh, RECOMPILES)
    text = text_outputs(cap)[0]
    assert "… and 2 more (all in the report's data" in text  # max_details = 1
    assert len(last(sh).recompile_details) == 3


def test_settings_with_config_in_a_cell(shell):
    sh = shell
    run(sh, SETUP)
    m = _magics(sh)
    assert (m.default_repeat, m.plot, m.hints, m.quiet, m.max_details, m.watch) == (
        5,
        True,
        True,
        False,
        8,
        False,
    )
    run(sh, "%config StanceMagics.default_repeat = 3")
    _, cap = run(sh, "%%stance default --compare\ny = f(torch.ones(3))")
    assert len(last(sh).compare.runs["eager"]) == 3
    assert "runs this cell 3× under force_eager" in " ".join(text_outputs(cap))
    assert images(cap) == 1
    run(sh, "%config StanceMagics.plot = False")
    _, cap = run(sh, "%%stance default --compare --repeat 2\ny = f(torch.ones(4))")
    assert images(cap) == 0 and len(html_outputs(cap)) >= 1
    run(sh, "%config StanceMagics.max_details = 1")
    _, cap = run(sh, RECOMPILES)
    assert "… and 2 more" in text_outputs(cap)[0] and "and 2 more" in html_outputs(cap)[0]
    # every view the session shows follows it (IPython's formatters, as the panel uses)
    shown, _ = sh.display_formatter.format(last(sh))
    assert "… and 2 more" in shown["text/plain"] and "and 2 more" in shown["text/html"]
    run(sh, "%config StanceMagics.hints = False")
    _, cap = run(sh, "%%stance default\nfor n in (6, 7):\n    f(torch.ones(n))")
    assert not any(t.startswith("hint:") for t in text_outputs(cap))
    run(sh, "%config StanceMagics.quiet = True")
    n = len(stance_magic.history())
    res, cap = run(sh, "%%stance default\ny = f(torch.ones(3))")
    assert res.success and cap.outputs == [] and len(stance_magic.history()) == n + 1
    assert run(sh, "%stance force_eager")[1].stdout == ""
    run(sh, "%config StanceMagics.quiet = False")
    run(sh, "%stance default -q")
    # watch follows %config, and %stance watch follows back
    run(sh, "%config StanceMagics.watch = True")
    assert get_engine().watch is True
    run(sh, "%stance watch off")
    assert m.watch is False and get_engine().watch is False
    # %config StanceMagics lists the settings
    out = run(sh, "%config StanceMagics")[1].stdout
    for name in ("default_repeat", "plot", "hints", "quiet", "max_details", "watch"):
        assert f"StanceMagics.{name}" in out, name


def test_a_bad_setting_is_refused_and_changes_nothing(shell):
    from traitlets import TraitError

    with capture_output():
        shell.run_cell("%config StanceMagics.default_repeat = 0")  # IPython logs the error
    m = _magics(shell)
    assert m.default_repeat == 5
    with pytest.raises(TraitError, match="default_repeat must be 1 to 10,000, not 10001"):
        m.default_repeat = 10_001
    with pytest.raises(TraitError, match="max_details must be 0 or more"):
        m.max_details = -1
    assert (m.default_repeat, m.max_details) == (5, 8)


def test_unload_gives_back_what_settings_changed(shell):
    """``max_details`` reaches every view of a report in the session through
    IPython's formatters while the extension is loaded; unload removes them."""
    run(shell, "import torch, stance_magic")
    run(shell, "%config StanceMagics.max_details = 2")
    m = _magics(shell)
    assert m in shell.configurables
    run(shell, RECOMPILES)
    rep = last(shell)
    shown, _ = shell.display_formatter.format(rep)  # what `rep` in a cell shows
    assert "… and 1 more" in shown["text/plain"]  # 3 recompiles: 2 shown
    html_formatter = shell.display_formatter.formatters["text/html"]
    assert "and 1 more" in html_formatter(rep)
    shell.run_cell("%unload_ext stance_magic")
    assert m not in shell.configurables
    assert "and 1 more" not in html_formatter(rep)  # the report's own view: 8 lines
    assert "and 1 more" not in str(rep)
    shell.run_cell("%load_ext stance_magic")
    assert sum(isinstance(c, StanceMagics) for c in shell.configurables) == 1


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_help_lists_every_option_with_its_help(shell):
    doc = shell.find_line_magic("stance").__doc__
    parser = StanceMagics.stance.parser
    flat = _flat(doc)
    options = [a for a in parser._actions if a.option_strings]
    assert len(options) == 17  # with --trace, --timeline and --verbose
    for action in options:
        for flag in action.option_strings:
            assert re.search(rf"(^|\s){re.escape(flag)}\b", doc), flag
        assert action.help and _flat(action.help.replace("%%", "%")) in flat, action.dest
    assert "STANCE" in doc and "%stance watch on|off" in doc  # the hand-written intro
    assert "In [2]: %%stance eager_then_compile" in doc  # and examples
    for name in ("default_repeat", "plot", "hints", "quiet", "max_details", "watch"):
        assert f"StanceMagics.{name} = " in doc, name
    out = run(shell, "%stance?")[1].stdout
    assert "--compare" in out and "--skip-guard-eval-unsafe" in out
    assert "StanceMagics.default_repeat = 5" in out


def test_one_table_of_what_each_form_accepts(shell):
    assert set(ACCEPTS) == set(FORMS)
    assert all(r.forms <= set(FORMS) for r in (*WORD_RULES, *RULES))
    for line, needle in [
        ("%stance reset -b eager", "%stance reset does not take -b (it goes with %%stance)"),
        ("%stance force_eager -m", "%stance STANCE does not take -m (it goes with %%stance)"),
        ("%stance watch on --no-plot", "%stance watch does not take --no-plot"),
        ("%stance history --ranks", "--ranks does not go with %stance history"),
        ("%stance reset --csv x.csv", "--csv, --json and --plot go with %stance history"),
    ]:
        res, _ = run(shell, line)
        err = res.error_in_exec
        assert type(err).__name__ == "UsageError", line
        assert needle in str(err) and "\n" not in str(err), (line, str(err))
    # what every form accepts still runs
    for line in ("%stance watch on -q", "%stance watch off -q", "%stance reset -q", "%stance -q"):
        assert run(shell, line)[0].success, line


def test_one_cell_tracker_for_magics_and_panel(shell):
    """The magics and a panel both follow the shell's cells: a cell (and a
    cell it runs) is counted once, and the end of the outermost is noted on
    the one tracker both read, inside the outside clock's bounds."""
    import time

    pytest.importorskip("ipywidgets")
    cells = get_engine().cells
    p = stance_magic.panel()
    try:
        assert p.engine.cells is cells
        shell.user_ns["cells"] = cells
        before = time.time()
        run(shell, "outer = cells.depth\nget_ipython().run_cell('inner = cells.depth')")
        after = time.time()
        assert (shell.user_ns["outer"], shell.user_ns["inner"]) == (1, 2)
        assert cells.depth == 0 and before <= cells.last_end <= after
    finally:
        p.close()
