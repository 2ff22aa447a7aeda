"""What --trace and --timeline wrote: the trace file, tlparse's report and
the timeline, as rows under a report (links in HTML, relative to the
notebook's folder where the file is under it)."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from .labels import TIMELINE, TLPARSE, TRACE
from .styles import _TD, _TH


def share_lines(rep: Any) -> list[tuple[str, str]]:
    """(what, where) rows: the trace file, tlparse's report, the timeline."""
    sh = rep.shared
    rows = []
    if sh.trace_file:
        ids = sh.trace_compile_ids
        what = TRACE.format(ids=f"{len(ids)} compile id{'s' if len(ids) != 1 else ''}")
        rows.append((what, _shown(sh.trace_file)))
    if sh.tlparse_index:
        rows.append((TLPARSE, _shown(sh.tlparse_index)))
    if sh.timeline_file:
        rows.append((TIMELINE, _shown(sh.timeline_file)))
    return rows


def _share_html(rep: Any) -> str:
    """Rows for the report's table; tlparse's index and the timeline as links
    (a notebook opens ``file`` links relative to the notebook's folder)."""
    e = html.escape
    out = []
    for what, where in share_lines(rep):
        href = _href(where)
        value = f'<a href="{e(href)}" target="_blank">{e(where)}</a>' if href else e(where)
        if what == TIMELINE:
            value += " (open in ui.perfetto.dev or chrome://tracing)"
        out.append(f'<tr><th style="{_TH}">{e(what)}</th><td style="{_TD}">{value}</td></tr>')
    return "".join(out)


def _shown(path: str) -> str:
    """A path as the report shows it: from the current directory (the
    notebook's folder) when it is under it, else as it is."""
    rel = _href(path)
    return rel if rel is not None else path


def _href(path: str) -> str | None:
    """A link a notebook can follow: relative to the current directory when
    the file is under it (Jupyter serves files from there), else None."""
    try:
        rel = os.path.relpath(os.path.realpath(path), os.path.realpath(os.getcwd()))
    except ValueError:
        return None
    if rel.startswith(".."):
        return None
    return "/".join(Path(rel).parts)
