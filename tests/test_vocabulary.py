"""One name per figure wherever it is shown (issue 37).

The time Dynamo spends finding a call's compiled code is *cache lookups*
(``stance_magic.render.labels.CACHE_LOOKUPS``): the report's row, every
chart's key and label, the history's, ranks' and sweep's column (its short
form ``lookups``), the CSV column ``lookup_s`` and its siblings. It was
"guards", "guard evaluation", "cache lookups (guards)" and ``guard_s``:
"guards" is only a part of it (it also builds the frame's locals). The
CSV's old column names still read from :meth:`CellReport.summary_row`, with
one ``DeprecationWarning`` each. No hint, README or docs page, nor a
notebook's markdown, calls the figure by an old name (``guard cost``, ``the
guard figure``, ``cache lookups (guards)``).

The same law for the other figures with one name in ``render/labels.py``:
*peak memory* (``PEAK_MEMORY``; never "peak mem" or "memory peaks"),
*execution* for a cell's wall time less its compile time and cache lookups
(``EXECUTION``; never "rest of the cell"), *code cache* for Dynamo's cache
of compiled code beside the *compile caches* (``CACHE_HITS``: ``code cache
2000 hits, 0 misses``; the row was "cache hits / misses"), and the history's *budget*
column (the row is "recompile budget"; the column was "entries"). The test
reads every string a user reads: the package's own (the report's rows and
headlines, the hints, the panel, the charts, the options' help: every string
constant but docstrings), what a real measured cell shows (its text and HTML,
the history's table, its charts, the CSV's and JSON's headers), the README,
the docs' pages and the notebooks' markdown.

The compile phases have one list of keys (``probe.PHASES``), which the
report's columns (``dynamo_s``, ...) and the render's labels follow.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import warnings
from pathlib import Path

import pytest
from matplotlib.figure import Figure

from stance_magic import plots, probe
from stance_magic.render import history_html, history_text
from stance_magic.render.export import csv_text, json_text
from stance_magic.render.labels import (
    BUDGET_COLUMN,
    CACHE_HITS,
    CACHE_LOOKUPS,
    EXECUTION,
    LOOKUPS_COLUMN,
    MEMORY_COLUMN,
    PEAK_MEMORY,
    PHASE_LABELS,
    RANK_COLUMNS,
)
from stance_magic.render.results import SWEEP_HEAD
from stance_magic.report import PHASES
from stance_magic.report.summary_row import OLD_COLUMNS

from conftest import last, run

CELL = (
    "%%stance default -q\n"
    "f = torch.compile(lambda x: x.sin() + 1, backend='eager')\n"
    "for _ in range(5):\n"
    "    f(torch.ones(3))"
)


def _texts(fig: Figure) -> list[str]:
    """Every piece of text a figure draws: titles, labels, ticks, keys."""
    out = [t.get_text() for t in fig.findobj(match=lambda a: hasattr(a, "get_text"))]
    return [t for t in out if t]


@pytest.fixture
def measured(sh):
    res, _ = run(sh, CELL)
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert rep.lookups.count == 4  # the first call compiled into an empty cache
    return rep


def test_the_report_row_and_the_tables_say_cache_lookups(measured):
    rep = measured
    text = rep.text(verbose=True)
    assert any(line.strip().startswith(CACHE_LOOKUPS) for line in text.splitlines())
    head = history_text([rep]).splitlines()[0].split()
    assert LOOKUPS_COLUMN in head and "guards" not in head
    assert RANK_COLUMNS["lookup_s"] == LOOKUPS_COLUMN
    assert "guards" not in SWEEP_HEAD
    assert LOOKUPS_COLUMN in SWEEP_HEAD


def test_every_chart_names_the_figure_cache_lookups(measured):
    rep = measured
    for fig in (plots.report_figure(rep), plots.history_figure([rep, rep])):
        texts = " | ".join(_texts(fig))
        assert CACHE_LOOKUPS in texts, texts
        assert "guard" not in texts.replace("skip_guard_eval_unsafe", ""), texts


def test_the_csv_says_lookup_and_the_old_columns_still_read_once(measured):
    rep = measured
    header = next(csv.reader(io.StringIO(csv_text([rep]))))
    lookup_columns = [h for h in header if "lookup" in h]
    assert "lookup_s" in header and "lookups_timed" in header
    # the number of guards is its own figure, and keeps its name
    assert [h for h in header if h.startswith("guard")] == ["guard_count"]
    assert not set(OLD_COLUMNS) & set(header)
    assert set(OLD_COLUMNS.values()) <= set(lookup_columns)
    row = rep.summary_row()
    from stance_magic.report import deprecated

    deprecated._WARNED.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert row["guard_s"] == row["lookup_s"] == rep.lookups.seconds
        assert row["guard_s"] == rep.lookups.seconds  # once
    assert len(caught) == 1 and caught[0].category is DeprecationWarning
    assert "read summary_row()['lookup_s']" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the user's line
    with pytest.raises(KeyError):
        row["no_such_column"]


def test_the_compile_phases_have_one_list_of_keys(measured):
    assert PHASES is probe.PHASES
    assert list(PHASE_LABELS) == list(PHASES)
    row = measured.summary_row()
    assert [f"{p}_s" for p in PHASES] == [
        k for k in row if k.endswith("_s") and k.removesuffix("_s") in PHASES
    ]


def test_the_recompile_limits_setting_has_one_wording():
    """What sets a frame's recompile limit is worded by one function
    (``render.limit_setting``): the limit row, the budget row and the hints
    say the same, and so does the limit's ``setting`` (it had a third
    wording for a torch.compile call's own limit)."""
    from stance_magic.render import limit_setting
    from stance_magic.render.advice import advise
    from stance_magic.report import Budget, CellReport, RecompileLimit

    glob = RecompileLimit(
        where="f (In [2], line 1)", config="recompile_limit", limit=8, compile_id="0/8"
    )
    own = RecompileLimit(
        where="g (In [3], line 1)",
        config="recompile_limit",
        limit=2,
        compile_id="1/2",
        per_call=True,
    )
    assert limit_setting(glob) == "torch._dynamo.config.recompile_limit"
    assert limit_setting(glob, short=True) == "recompile_limit"
    assert (
        limit_setting(own)
        == limit_setting(own, short=True)
        == ("recompile_limit=2 of its torch.compile")
    )
    for lim in (glob, own):
        rep = CellReport(recompile_limits=[lim])
        assert limit_setting(lim) in rep.text(verbose=True)
        assert limit_setting(lim) in advise(rep)[0]
    budget = Budget(where="h (In [4], line 1)", entries=7, limit=8, config="recompile_limit")
    rep = CellReport(recompile_budget=[budget])
    assert f"({limit_setting(budget, short=True)})" in rep.text(verbose=True)
    assert f"({limit_setting(budget)})" in " ".join(advise(rep))
    assert (glob.setting, own.setting) == (limit_setting(glob), limit_setting(own))


#: What the cache-lookup figure was called before it had one name: never
#: again, in any text a user reads (``-g``'s old spelling ``--profile-guards``
#: and ``bench_guards.py``'s file name stay: an alias and a path).
_OLD_LOOKUP_NAMES = re.compile(
    r"cache lookups \(guards\)|\bguards? (?:cost|figure|time|overhead)s?\b|what the guards cost",
    re.IGNORECASE,
)


def _user_texts() -> dict[str, str]:
    """Every page a user reads, by where it is: the README, the docs' pages,
    the notebooks' markdown cells, and the strings of the hints' module."""
    root = Path(__file__).resolve().parent.parent
    out = {"README.md": (root / "README.md").read_text("utf-8")}
    for page in sorted((root / "docs").glob("*.md")):
        out[f"docs/{page.name}"] = page.read_text("utf-8")
    for nb in sorted((root / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text("utf-8"))["cells"]
        out[f"notebooks/{nb.name}"] = "\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        )
    advice = root / "stance_magic" / "render" / "advice.py"
    strings = [
        n.value
        for n in ast.walk(ast.parse(advice.read_text("utf-8")))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    out["stance_magic/render/advice.py (hints)"] = "\n".join(strings)
    return out


def test_no_page_hint_or_notebook_calls_the_lookup_figure_guards():
    texts = _user_texts()
    assert len(texts) > 20 and any(k.startswith("notebooks/") for k in texts)
    found = {
        where: sorted({m.group(0) for m in _OLD_LOOKUP_NAMES.finditer(text)})
        for where, text in texts.items()
    }
    found = {k: v for k, v in found.items() if v}
    assert not found, f"the cache-lookup figure called by an old name: {found}"
    # the rule itself catches what it is for
    assert _OLD_LOOKUP_NAMES.search("hits/misses, guard cost, peak memory")
    assert _OLD_LOOKUP_NAMES.search("cache lookups (guards) are 40% of this cell")
    assert not _OLD_LOOKUP_NAMES.search("the guards that tell entries apart")


#: Each figure's one name, and what it must never be called (in any text a
#: user reads: see _every_text).
_SECOND_NAMES = {
    CACHE_LOOKUPS: _OLD_LOOKUP_NAMES,
    PEAK_MEMORY: re.compile(r"\bpeak mem\b(?!ory)|\bmemory peaks?\b", re.IGNORECASE),
    EXECUTION: re.compile(r"\brest of the cell\b", re.IGNORECASE),
    # Dynamo's code cache, as against the compile caches (the row was "cache
    # hits / misses", beside "compile caches")
    CACHE_HITS: re.compile(r"(?<!code )\bcache hits / misses\b", re.IGNORECASE),
}

PACKAGE = Path(__file__).resolve().parent.parent / "stance_magic"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of a module's docstring nodes (for maintainers, not shown)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _package_strings() -> dict[str, str]:
    """Every string constant of the package but docstrings, by module: the
    report's rows and headlines, the hints, the panel's words, the charts'
    labels, the options' help, the notes (f-strings' literal parts too)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        skip = _docstrings(tree)
        strings = [
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
        ]
        out[str(path.relative_to(PACKAGE.parent))] = "\n".join(strings)
    return out


MEASURED_CELL = (
    "%%stance default -m -q\n"
    "g = torch.compile(lambda x, n: x * n, backend='eager')\n"
    "for n in (1, 2, 3):\n"
    "    g(torch.ones(3), n)"
)


def _shown_texts(sh) -> dict[str, str]:
    """What a real measured cell (memory on, a frame that recompiled) shows:
    its report's text and HTML, the history's table as text and HTML, the
    words of its charts, and the CSV's and JSON's headers."""
    res, _ = run(sh, MEASURED_CELL)
    assert res.success, res.error_in_exec
    rep = last(sh)
    assert rep.memory and rep.summary_row()["recompiles"] >= 1
    hist = [rep, rep]
    rows = json.loads(json_text(hist))
    return {
        "the report (text)": rep.text(verbose=True),
        "the report (HTML)": rep._repr_html_() or "",
        "the history (text)": history_text(hist),
        "the history (HTML)": history_html(hist),
        "the report's chart": " | ".join(_texts(plots.report_figure(rep))),
        "the history's chart": " | ".join(_texts(plots.history_figure(hist))),
        "the CSV's header": " ".join(next(csv.reader(io.StringIO(csv_text(hist))))),
        "the JSON's keys": " ".join(sorted(rows[0] if isinstance(rows, list) else rows)),
    }


def _every_text(sh) -> dict[str, str]:
    return {**_user_texts(), **_package_strings(), **_shown_texts(sh)}


def test_no_text_a_user_reads_gives_a_figure_a_second_name(sh):
    texts = _every_text(sh)
    assert any(k.startswith("stance_magic/widgets/panel") for k in texts)  # the panel
    assert "stance_magic/render/advice.py" in texts and "the history's chart" in texts
    found = {}
    for name, rule in _SECOND_NAMES.items():
        for where, text in texts.items():
            if where == "stance_magic/render/labels.py":
                continue  # the table that names them (its comments say what not to say)
            hits = sorted({m.group(0) for m in rule.finditer(text)})
            if hits:
                found.setdefault(name, {})[where] = hits
    assert not found, f"a figure called by a second name (its one name: the key): {found}"
    # the figures are shown, by their one name, where the cell has them
    shown = {k: v for k, v in texts.items() if not k.endswith(".py") and "/" not in k}
    assert PEAK_MEMORY in shown["the history (text)"].splitlines()[0]
    assert EXECUTION in shown["the report's chart"]
    assert EXECUTION in shown["the history's chart"]
    # the rules catch what they are for, and leave the words' other uses
    assert _SECOND_NAMES[PEAK_MEMORY].search("lookups  peak mem  fallbacks")
    assert _SECOND_NAMES[PEAK_MEMORY].search("memory peaks (-m): eager and steady")
    assert not _SECOND_NAMES[PEAK_MEMORY].search("the peak memory of a run")
    assert _SECOND_NAMES[EXECUTION].search("compile, cache lookups, rest of the cell")
    assert _SECOND_NAMES[CACHE_HITS].search("  cache hits / misses  2000 / 0")
    assert not _SECOND_NAMES[CACHE_HITS].search("code cache hits / misses, lookups timed")
    rows = shown["the report (text)"].splitlines()
    assert any(re.match(rf"  {CACHE_HITS} +\d+ hits?, \d+ miss(es)?$", r) for r in rows), rows


def test_the_historys_columns_take_their_names_from_the_table(sh):
    """The history's optional columns are the labels' (a recompiled frame's
    budget, the peak memory), so the table and the docs say the same."""
    res, _ = run(sh, MEASURED_CELL)
    assert res.success, res.error_in_exec
    rep = last(sh)
    import stance_magic.render.history as hist_mod

    columns = hist_mod._columns([rep])
    assert MEMORY_COLUMN in columns and MEMORY_COLUMN == ("peak_bytes", PEAK_MEMORY)
    head = history_text([rep]).splitlines()[0]
    assert PEAK_MEMORY in head and "peak mem " not in head.replace(PEAK_MEMORY, "")
    assert BUDGET_COLUMN in columns and BUDGET_COLUMN == ("budget", "budget")
    assert "budget" in head.split() and "entries" not in head.split()
    assert RANK_COLUMNS["peak_bytes"] == PEAK_MEMORY
