"""Every error said once, at the user's line: what a user sees of a failing
``%%stance`` cell (the report's text and HTML as the notebook shows them,
and the panel), for a call ``fail_on_recompile`` refused, a compile whose
error reached the cell, and the user's own exception.

- the headline ends ``failed (RuntimeError)``: the type, never a cut message;
- the error row holds the message once, naming the cell ``In [n]`` where
  torch's message names IPython's file for it (the exception the cell gets
  is torch's, unchanged);
- each guard that failed is listed once; a cell whose recompiles were all
  refused says "why it would recompile" (it never recompiled);
- a failed compile whose error is the cell's says so, not its message again;
- the panel shows the headline once (its title), not again in the report.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from stance_magic.session.engine import get_engine

from conftest import run, ui

SETUP = """\
import torch, stance_magic
def f(x):
    return x.sin() + 1
cf = torch.compile(f, backend="eager")
cf(torch.ones(3))
def exploding(gm, example_inputs):
    raise RuntimeError("the backend exploded")
def g(x):
    return x.cos() * 2
cg = torch.compile(g, backend=exploding)
def h():
    raise ValueError("boom in the user's code")
"""

#: name -> (the cell's body, its exception's type, its message (the part
#: any version of torch writes), the guard failures it names)
CASES = {
    "refused recompile": (
        "%%stance fail_on_recompile --no-plot\ncf(torch.ones(4))",
        "RuntimeError",
        "Detected recompile when torch.compile stance is 'fail_on_recompile'",
        ["size mismatch at index 0. expected 3, actual 4"],
    ),
    "failed compile": (
        "%%stance --no-plot\ncg(torch.ones(3))",
        "BackendCompilerFailed",
        "the backend exploded",
        [],
    ),
    "user exception": (
        "%%stance --no-plot\nh()",
        "ValueError",
        "boom in the user's code",
        [],
    ),
}


def _plain(markup: str) -> str:
    """An HTML output's text, as a reader sees it."""
    return html.unescape(re.sub(r"<[^>]+>", " ", markup))


def _shown(cap: Any) -> tuple[str, str]:
    """The report as the cell shows it: its text/plain and its text/html."""
    (out,) = [o.data for o in cap.outputs if "stance_magic ·" in o.data.get("text/plain", "")]
    return out["text/plain"], _plain(out["text/html"])


@pytest.mark.parametrize("case", list(CASES))
def test_each_error_and_guard_failure_is_said_once(sh, case):
    body, etype, message, guards = CASES[case]
    assert sh.run_cell(SETUP).success
    res, cap = run(sh, body)
    err = res.error_in_exec
    assert type(err).__name__ == etype, repr(err)
    rep = get_engine().history[-1]
    text, page = _shown(cap)
    for shown in (text, page):
        assert shown.count(message) == 1, (message, shown)
        for g in guards:
            assert shown.count(g) == 1, (g, shown)
        # the headline says the type (the message is the error row's)
        assert shown.count(f"failed ({etype})") == 1, shown
        # the cell by its number, never by IPython's file for it
        assert "<ipython-input" not in shown and "ipykernel_" not in shown
    assert text.splitlines()[0].endswith(f"failed ({etype})")
    assert f"raised at In [{rep.execution_count}], line" in text
    if case == "refused recompile":
        assert "why it would recompile" in text and "why it recompiled" not in text
        if "filename:" in str(err):  # (torch 2.8's message names no file)
            assert re.search(r"filename: 'In \[\d+\]'", rep.error), rep.error
            # the exception the cell got is torch's, unchanged
            assert "<ipython-input-" in str(err) and "filename: 'In [" not in str(err)
    if case == "failed compile":
        assert "FAILED: its error is the cell's (see error)" in text


def test_the_panel_shows_a_failing_cells_headline_once(sh):
    pytest.importorskip("ipywidgets")
    assert sh.run_cell(SETUP).success
    p = sh.user_ns["stance_magic"].panel()
    try:
        ui(p).live.selected_index = 0  # the live area opened
        run(sh, CASES["refused recompile"][0])
        parts = ui(p)
        title = parts.live.titles[0]
        assert title.endswith("failed (RuntimeError)"), title
        body = _plain(parts.report.value)
        assert "failed (RuntimeError)" not in body and "stance_magic ·" not in body
        assert body.count(CASES["refused recompile"][2]) == 1
    finally:
        p.close()
        get_engine().set_watch(False)
