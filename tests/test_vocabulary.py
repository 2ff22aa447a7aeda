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
from stance_magic.compare import SweepResult
from stance_magic.export import csv_text
from stance_magic.render import history_text
from stance_magic.render.labels import CACHE_LOOKUPS, LOOKUPS_COLUMN, PHASE_LABELS, RANK_COLUMNS
from stance_magic.report import PHASES
from stance_magic.report.rows import OLD_COLUMNS

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
    assert "guards" not in SweepResult.HEAD
    assert LOOKUPS_COLUMN in SweepResult.HEAD


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
    from stance_magic.advice import advise
    from stance_magic.render import limit_setting
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
    advice = root / "stance_magic" / "advice.py"
    strings = [
        n.value
        for n in ast.walk(ast.parse(advice.read_text("utf-8")))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    out["stance_magic/advice.py (hints)"] = "\n".join(strings)
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
