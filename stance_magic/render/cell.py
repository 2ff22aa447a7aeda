"""A cell's report as text and HTML: its rows gathered from the section
modules in the report's order, what the brief report folds, the notes, the
hints and the files --trace and --timeline wrote."""

from __future__ import annotations

import html
from typing import Any, Iterable, Sequence

from .breaks import break_rows
from .caches import cache_rows
from .calls import call_rows
from .compare import compare_rows
from .compiles import compile_rows
from .cudagraphs import cudagraph_rows
from .headline import headline, headline_rows
from .labels import DOCS, ERROR, MORE_TEXT, ROW_DOCS, _more
from .links import _linked
from .lookups import lookup_rows
from .memory import memory_rows
from .recompiles import recompile_rows
from .rows import MAX_DETAILS, Row
from .sharing import _share_html, share_lines
from .styles import _DOC_LINK, _ERR, _HEADLINE, _HINT, _LI, _SUMMARY, _TABLE, _TD, _TH, _UL
from .tracing import tracing_rows


def report_rows(rep: Any, hinted: bool = False) -> list[Row]:
    """Every row of a cell report, in order (``hinted``: the report shows
    hints, which say why it recompiled)."""
    rows = headline_rows(rep)
    rows += compile_rows(rep)
    rows += tracing_rows(rep)
    rows += cache_rows(rep)
    rows += recompile_rows(rep, hinted)
    rows += break_rows(rep)
    rows += cudagraph_rows(rep)
    rows += lookup_rows(rep)
    rows += memory_rows(rep)
    rows += call_rows(rep)
    rows += compare_rows(rep)
    if rep.error:
        rows.append(Row(ERROR, rep.error, _error_details(rep)))
    return rows


def _error_details(rep: Any) -> list[str]:
    """The user's line that made the failing call, where the traceback has one."""
    where = getattr(rep, "error_where", "")
    return [f"raised at {where}"] if where else []


def _notes(rep: Any) -> list[str]:
    notes = list(rep.notes)
    if rep.memory_on:
        notes.append(
            "times taken with memory measuring on (-m): each allocation was reported to "
            "torch's profiler while the cell ran (reading the events back afterwards is "
            "not in the wall time)"
        )
    g = rep.gathered
    if g is not None and g.rank != g.to:
        what = "report" if g.mode == "full" else "summary"
        notes.append(
            f"rank {g.rank} of {g.world_size}: this rank's {what} went to rank {g.to}, which "
            "shows the combined view of all ranks"
        )
    return notes


def _fold(rows: list[Row], verbose: bool) -> tuple[list[Row], list[Row]]:
    """(rows shown, rows with something folded: whole, or their details;
    the headline's own rows too, so the folded part holds every figure)."""
    if verbose:
        return rows, []
    shown = [
        r if r.brief == "row" else r._replace(details=[])
        for r in rows
        if r.brief in ("row", "value")
    ]
    folded = [r for r in rows if r.brief in ("", "head") or (r.brief == "value" and r.details)]
    return shown, folded


def _more_names(folded: Sequence[Row]) -> str:
    """The folded rows by name (the headline's own left out); a row shown with
    its details folded is named ``label (details)``."""
    return ", ".join(
        f"{r.label} (details)" if r.brief == "value" else r.label
        for r in folded
        if r.brief != "head"
    )


def report_text(
    rep: Any,
    max_details: int = MAX_DETAILS,
    verbose: bool = False,
    hints: Sequence[str] = (),
) -> str:
    """A report as text: its headline, its ``hints``, then the rows that
    matter for this cell (every row, with ``verbose``), details under them."""
    rows = report_rows(rep, hinted=bool(hints))
    shown, folded = _fold(rows, verbose)
    out = [headline(rep)]
    out.extend(f"hint: {h}" for h in hints)
    # labels padded as in the whole report, so a row reads the same brief or verbose
    width = max(len(r.label) for r in rows)
    for label, value, details, _ in shown:
        out.append(f"  {label:<{width}}  {value}")
        for d in details[:max_details]:
            out.append(f"  {'':<{width}}    - {d}")
        if len(details) > max_details:
            out.append(f"  {'':<{width}}    … {_more(len(details) - max_details)}")
    for note in _notes(rep):
        out.append(f"  note: {note}")
    out.extend(f"  {what}: {where}" for what, where in share_lines(rep))
    more = _more_names(folded)
    if more:
        out.append(f"  {MORE_TEXT}: {more}")
    return "\n".join(out)


def _rows_html(rows: Sequence[Row], max_details: int) -> str:
    e = html.escape
    out = []
    for label, value, details, _ in rows:
        style = f"{_TD};{_ERR}" if label == ERROR else _TD
        det = ""
        if details:
            det = (
                f'<ul style="{_UL}">'
                + "".join(f'<li style="{_LI}">{_linked(e(d))}</li>' for d in details[:max_details])
                + "</ul>"
            )
        if len(details) > max_details:
            rest = "".join(f'<li style="{_LI}">{_linked(e(d))}</li>' for d in details[max_details:])
            det += (
                f'<details><summary style="{_SUMMARY}">{e(_more(len(details) - max_details))}'
                f'</summary><ul style="{_UL}">{rest}</ul></details>'
            )
        doc = ROW_DOCS.get(label)
        head = e(label)
        if doc:
            head += (
                f' <a href="{DOCS}{doc}" target="_blank" rel="noopener" '
                f'title="how this is measured (docs)" style="{_DOC_LINK}">?</a>'
            )
        out.append(
            f'<tr><th style="{_TH}">{head}</th><td style="{style}">{e(value)}{det}</td></tr>'
        )
    return "".join(out)


def report_html(
    rep: Any,
    max_details: int = MAX_DETAILS,
    verbose: bool = False,
    hints: Sequence[str] = (),
) -> str:
    """A report as HTML (every string escaped, inline styles): the headline,
    the hints, a table of the rows that matter; the rest in a ``<details>``
    (every row in the table with ``verbose``). The headline and the hints are
    blocks of their own, as wide as the output (a caption would be as narrow
    as a table of few rows)."""
    e = html.escape
    rows = report_rows(rep, hinted=bool(hints))
    shown, folded = _fold(rows, verbose)
    hint_lines = "".join(
        f'<div class="sm-hint" style="{_HINT}">hint: {_linked(e(h))}</div>' for h in hints
    )
    notes = "".join(f'<tr><td colspan=2 style="{_TD}"><i>{e(n)}</i></td></tr>' for n in _notes(rep))
    body = _rows_html(shown, max_details) + _share_html(rep) + notes
    out = (
        f'<div class="sm-report-html" style="text-align:left">'
        f'<div class="sm-headline" style="{_HEADLINE}">{e(headline(rep))}</div>'
        + hint_lines
        + (f'<table class="sm-report" style="{_TABLE}">{body}</table>' if body else "")
    )
    if folded:
        out += (
            f'<details class="sm-more"><summary style="{_SUMMARY}">'
            f"more: {e(_more_names(folded))}</summary>"
            f'<table class="sm-report sm-more-rows" style="{_TABLE}">'
            + _rows_html(folded, max_details)
            + "</table></details>"
        )
    return out + "</div>"


def advice_html(lines: Iterable[str]) -> str:
    """The advice as an inline-styled list."""
    items = "".join(f'<li style="{_LI}">{html.escape(a)}</li>' for a in lines)
    return f'<ul class="sm-advice" style="{_UL};margin:2px 0 6px;font-size:12px">{items}</ul>'
