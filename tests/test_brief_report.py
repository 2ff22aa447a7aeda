"""A report read in five seconds: a headline and its hint first, only the
rows that matter for the cell, the rest folded (``-v`` shows them), styles
that survive an untrusted notebook, and the user's line of a failing call.

Every figure of the headline is checked against a source that does not go
through stance_magic: a counting backend (graphs compiled), torch's own
``recompiles`` log records, Python's traceback (the user's line)."""

from __future__ import annotations

import re
import traceback
from html.parser import HTMLParser
from pathlib import Path

import pytest

from stance_magic.render import DOCS, ROW_DOCS

from conftest import RECOMPILES_LOGGER, html_outputs, last, run, text_outputs, torch_log

DOCS_DIR = Path(__file__).resolve().parents[1] / "docs"

#: a three-line cell with one recompile (a new rank: no dynamic shapes help)
RECOMPILE_CELL = (
    "%%stance default\ny = rk(torch.ones(3))\ny = rk(torch.ones(3, 3))\ny = rk(torch.ones(4, 4))"
)


def _report(cap) -> str:
    (text,) = [t for t in text_outputs(cap) if t.startswith("stance_magic · ")]
    return text


def _one_recompile(counting):
    counting.run_cell("rk = torch.compile(lambda x: (x * 2).sin(), backend=counting)")
    counting.run_cell("rk(torch.ones(3))")  # compiled before the cell
    before = counting.user_ns["compiled_graphs"][0]
    with torch_log(RECOMPILES_LOGGER, recompiles=True) as log:
        res, cap = run(counting, RECOMPILE_CELL)
    assert res.error_in_exec is None, res.error_in_exec
    graphs = counting.user_ns["compiled_graphs"][0] - before
    return cap, graphs, log.messages


def test_a_one_recompile_cell_reads_in_ten_lines_headline_and_hint_first(counting):
    cap, graphs, records = _one_recompile(counting)
    rep = last(counting)
    text = _report(cap)
    lines = text.splitlines()
    assert len(lines) <= 10, text
    head = lines[0]
    # the headline: the cell, its stance, its time, what happened and what it cost
    n = rep.execution_count
    assert head.startswith(f"stance_magic · In [{n}] · default · "), head
    assert graphs == 1 and f"compiled {graphs} graph in " in head, (graphs, head)
    recompiles = [m for m in records if "Recompiling function" in m]
    assert len(recompiles) == 1 == len(rep.recompiles), records
    assert "1 recompile (x: rank 1 → 2)" in head, head
    assert re.search(r"cache lookup [\d.]+ [µnm]?s a call", head), head
    # then the hint, then the rows that matter, then where the rest is
    assert lines[1].startswith("hint: ") and "rank" in lines[1], lines[1]
    assert [ln.split()[0] for ln in lines[2:] if not ln.startswith("    ")][:2] == [
        "compiles",
        "recompiles",
    ]
    assert lines[-1].startswith("  more with -v: "), lines[-1]
    for folded in ("compile time", "cache lookups", "a compiled call", "code cache"):
        assert folded in lines[-1] and f"\n  {folded} " not in text, folded
    # the hint says why it recompiled: not said twice
    assert "why it recompiled" not in "\n".join(lines[:-1])


def test_verbose_shows_every_row_by_option_config_and_api(counting):
    _one_recompile(counting)
    rep = last(counting)
    brief, full = rep.text(), rep.text(verbose=True)
    more = brief.splitlines()[-1].removeprefix("  more with -v: ").split(", ")
    folded = [name.removesuffix(" (details)") for name in more]
    assert "dynamic shapes (details)" in more  # shown, its details folded
    assert "cache lookups" in folded and "compile time" in folded
    for label in ("stance", "wall time", *folded):
        assert re.search(rf"^  {re.escape(label)} ", full, flags=re.M), label
    assert "more with -v" not in full
    assert full.splitlines()[:2] == brief.splitlines()[:2]  # headline and hint alike
    # %%stance -v, and %config StanceMagics.verbose for every cell
    _, cap = run(counting, "%%stance default -v\ny = rk(torch.ones(3, 3))")
    assert "\n  cache lookups " in _report(cap) and "more with -v" not in _report(cap)
    counting.run_cell("%config StanceMagics.verbose = True")
    _, cap = run(counting, "%%stance default\ny = rk(torch.ones(3, 3))")
    assert "\n  cache lookups " in _report(cap)
    counting.run_cell("%config StanceMagics.verbose = False")
    _, cap = run(counting, "%%stance default\ny = rk(torch.ones(3, 3))")
    assert "\n  cache lookups " not in _report(cap)
    # the hints can be turned off: the report then says why it recompiled
    counting.run_cell("%config StanceMagics.hints = False")
    _, cap = run(counting, "%%stance default\ny = rk(torch.ones(5, 5, 5))")
    text = _report(cap)
    assert "hint:" not in text and "\n  why it recompiled " in text


class _Cells(HTMLParser):
    """Every tag with its inline style, and whether it sits in a <details>."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, str, bool]] = []
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "details":
            self.depth += 1
        self.tags.append((tag, dict(attrs).get("style") or "", self.depth > 0))

    def handle_endtag(self, tag):
        if tag == "details":
            self.depth -= 1


def test_html_holds_its_layout_without_a_style_element(counting):
    """JupyterLab drops a <style> element from an untrusted notebook's
    outputs and keeps style attributes: every cell is styled inline."""
    cap, _, _ = _one_recompile(counting)
    (page,) = [h for h in html_outputs(cap) if "sm-report" in h]
    assert "<style" not in page
    cells = _Cells()
    cells.feed(page)
    for tag, style, _ in cells.tags:
        if tag in ("td", "th", "li", "ul", "caption", "summary", "div"):
            assert "text-align:left" in style, (tag, style)
    # the headline first, then the hint, then the rows; the rest folded
    rep = last(counting)
    head = re.search(r'<div class="sm-headline"[^>]*>(.*?)</div>', page).group(1)
    assert head.startswith(f"stance_magic · In [{rep.execution_count}] · default")
    after = re.search(
        r'class="sm-headline"[^>]*>.*?</div><div class="sm-hint"[^>]*>(.*?)</div>', page
    )
    assert after and after.group(1).startswith("hint: ")
    assert page.index('class="sm-hint"') < page.index("<table")
    assert any(tag == "table" and inside for tag, _, inside in cells.tags)
    shown, folded = page.split('<details class="sm-more">', 1)

    def labels(part: str) -> list[str]:
        return [re.sub(r"<.*", "", th).strip() for th in re.findall(r"<th[^>]*>(.*?)</th>", part)]

    assert "recompiles" in labels(shown) and "cache lookups" not in labels(shown)
    assert {"cache lookups", "wall time"} <= set(labels(folded))


def test_each_folded_rows_explanation_is_in_the_docs_it_links_to():
    """How a figure is measured is written once, in the docs (linked from the
    row's label), not in every report."""
    for label, page in ROW_DOCS.items():
        name, _, anchor = page.partition("#")
        doc = DOCS_DIR / name
        assert doc.exists(), (label, page)
        if anchor:
            heads = [
                re.sub(r"[^a-z0-9 -]", "", h.lower()).strip().replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", doc.read_text(), flags=re.M)
            ]
            assert anchor in heads, (label, anchor, heads)
    assert DOCS.endswith("/docs/")


def test_the_lookup_row_says_how_in_a_line_not_a_paragraph(counting):
    _one_recompile(counting)
    rep = last(counting)
    (method,) = [ln for ln in rep.text(verbose=True).splitlines() if "timed in situ" in ln]
    assert len(method.split()) <= 30, method
    assert "timed in situ" not in rep.text()  # folded in the brief report
    assert f'href="{DOCS}call-anatomy.md#how-it-is-measured"' in rep.html()


def test_the_error_row_names_the_users_line_of_the_failing_call(counting):
    counting.run_cell(
        "fr = torch.compile(lambda x: x.cos(), backend=counting)\n"
        "def helper(x):\n"
        "    return fr(x)\n"
        "fr(torch.ones(2))"
    )
    res, cap = run(counting, "%%stance fail_on_recompile\nz = 1\nhelper(torch.ones(2, 2))")
    err = res.error_in_exec
    assert isinstance(err, RuntimeError) and "fail_on_recompile" in str(err)
    # Python's own traceback: the cell's line that called helper, and helper's line
    frames = traceback.extract_tb(err.__traceback__)
    # (the outer <module> is IPython's call of the cell magic)
    cell_lines = [f.lineno for f in frames if f.name == "<module>"]
    helper_lines = [f.lineno for f in frames if f.name == "helper"]
    assert cell_lines[-1] == 2 and helper_lines == [3], frames
    rep = last(counting)
    n = rep.execution_count
    assert rep.error_where.startswith("In [") and " line 3 in helper, from " in rep.error_where
    assert rep.error_where.endswith(f"In [{n}], line 2"), rep.error_where
    text = _report(cap)
    assert f"raised at {rep.error_where}" in text
    assert text.splitlines()[0].endswith("failed (RuntimeError)")


@pytest.mark.parametrize("hints", [True, False])
def test_hints_show_once(counting, hints):
    """A report carries its hints under its headline: none shown again after it."""
    counting.run_cell(f"%config StanceMagics.hints = {hints}")
    cap, _, _ = _one_recompile(counting)
    outs = text_outputs(cap)
    assert sum(t.count("hint: ") for t in outs) == (1 if hints else 0), outs


def test_eager_fallbacks_say_misses_and_calls_when_nested_frames_missed_too():
    """eager_on_recompile: every lookup that misses runs eagerly, a call's own
    and those of frames nested in it (GPT-2 through transformers' shared
    decorator: 8 a call). The row counts misses; the headline counts calls;
    where they differ the row says both."""
    from stance_magic.report import CallAccount, CellReport

    rep = CellReport(
        stance="eager_on_recompile",
        eager_fallbacks=96,
        compiled_calls=12,
        calls=CallAccount(eager={"eager_on_recompile": 12}),
    )
    assert "12 calls ran eagerly (eager_on_recompile)" in rep.text().splitlines()[0]
    row = r"  eager fallbacks +96 lookups missed and ran eagerly, in 12 calls"
    assert re.search(row, rep.text())
    same = CellReport(
        stance="eager_on_recompile",
        eager_fallbacks=2,
        compiled_calls=2,
        calls=CallAccount(eager={"eager_on_recompile": 2}),
    )
    assert re.search(r"  eager fallbacks +2$", same.text(), re.MULTILINE)
